# TEMPORARY serialization helper (deleted when done)
import json
E=1700000000
D='/work/main/Tests/FanoutTraceTests/Fixtures/replay/'
S='com.example.scores'; TS=S+'.push-type.liveactivity'
N='com.example.news'; TN=N+'.push-type.liveactivity'
SCORE={"Score":{"home":"int","away":"int"}}
OK=["applied","ignoredEnded","ignoredStaleTimestamp","throttled","decodeFailed","limitExceeded","expired","coalesced"]
RJ=["PayloadTooLarge","PayloadEmpty","InvalidPushType","TopicDisallowed","BadTopic","BadPriority","BadCollapseId","BadMessageId","BadExpirationDate","BadRequestPayload"]
UR=["BadDeviceToken","Unregistered","ChannelNotRegistered"]
def H(schemas=SCORE, perApp=5, perDevice=10, budget=None):
    return {"trace":1,"epoch":E,"schemas":schemas,"limits":{"perApp":perApp,"perDevice":perDevice},"budgetPerHour":budget}
def req(at, act, tok, device="d1", app=S, type="Score", state=None, stale=None, rel=0, channel=None, attrs=None):
    return {"at":at,"op":"request","device":device,"app":app,"activity":act,"type":type,"attributes":attrs if attrs is not None else {},"state":state if state is not None else {"home":0,"away":0},"staleDate":stale,"relevance":rel,"token":tok,"channel":channel}
def push(at, payload, token=None, channel=None, startToken=None, topic=TS, priority=10, expiration=0, collapseId=None, apnsId=None, pushType="liveactivity", newActivity=None, newToken=None):
    d={"at":at,"op":"push"}
    if token is not None: d["token"]=token
    if channel is not None: d["channel"]=channel
    if startToken is not None: d["startToken"]=startToken
    d.update({"pushType":pushType,"topic":topic,"priority":priority,"expiration":expiration,"collapseId":collapseId,"apnsId":apnsId,"payload":payload})
    if startToken is not None: d["newActivity"]=newActivity; d["newToken"]=newToken
    return d
def upd(ts, h, a, extra="", ev="update"):
    return '{"aps":{"timestamp":%s,"event":"%s","content-state":{"home":%s,"away":%s}%s}}' % (ts, ev, h, a, extra)
def end(ts, extra=""):
    return '{"aps":{"timestamp":%s,"event":"end"%s}}' % (ts, extra)
def start(ts, h=0, a=0, extra=""):
    return '{"aps":{"timestamp":%s,"event":"start","content-state":{"home":%s,"away":%s},"attributes-type":"Score","attributes":{"team":"x"},"alert":{"title":"Go","body":"Kick-off"}%s}}' % (ts, h, a, extra)
def stok(at, tok, device="d1", app=S): return {"at":at,"op":"startToken","device":device,"app":app,"token":tok}
def rot(at, a, tok): return {"at":at,"op":"rotate","activity":a,"token":tok}
def sub(at, a, ch): return {"at":at,"op":"subscribe","activity":a,"channel":ch}
def dis(at, a): return {"at":at,"op":"dismiss","activity":a}
def adv(at): return {"at":at,"op":"advance"}
def ordered(d, keys):
    assert set(d) <= set(keys), d
    return {k: d[k] for k in keys if d.get(k)}
def act(a, state, ts, content, stale, rel, outcomes, device="d1", app=S):
    return {"activity":a,"device":device,"app":app,"state":state,"timestamp":ts,"content":content,"staleDate":stale,"relevance":float(rel),"outcomes":ordered(outcomes,OK)}
def dev(d, ls, isl): return {"device":d,"lockScreen":ls,"island":isl}
def tot(pushes, rejected, unroutable, routed, deliveries, outcomes, requests, limitExceeded=0):
    assert pushes == sum(rejected.values())+sum(unroutable.values())+routed
    assert deliveries == sum(outcomes.values())
    return {"totals":{"pushes":pushes,"rejected":ordered(rejected,RJ),"unroutable":ordered(unroutable,UR),"routed":routed,"deliveries":deliveries,"outcomes":ordered(outcomes,OK),"requests":requests,"limitExceeded":limitExceeded}}
def w(name, trace, dump, tail=""):
    with open(D+name+'.trace.jsonl','w',encoding='utf-8') as f:
        for l in trace:
            f.write((l if isinstance(l,str) else json.dumps(l,ensure_ascii=False,separators=(',',':')))+'\n')
        f.write(tail)
    with open(D+name+'.dump.jsonl','w',encoding='utf-8') as f:
        for l in dump: f.write(json.dumps(l,ensure_ascii=False)+'\n')
    # sanity: activity lines sorted, device lines sorted, push count
    acts=[l["activity"] for l in dump if "activity" in l]; devs=[l["device"] for l in dump if "lockScreen" in l]
    assert acts==sorted(acts) and devs==sorted(devs), (acts,devs)
    np=sum(1 for l in trace if isinstance(l,dict) and l.get("op")=="push")
    assert np==dump[-1]["totals"]["pushes"], (np, dump[-1])
    nr=sum(1 for l in trace if isinstance(l,dict) and l.get("op")=="request")
    assert nr==dump[-1]["totals"]["requests"], (nr,)
    print("wrote", name, len(trace), "lines")
